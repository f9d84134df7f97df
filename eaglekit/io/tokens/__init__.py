"""Token files read from disk: tokenizer files, chat templates (with their bounded rendering), and
vocabulary-map files (d2t/t2d). Imports :mod:`eaglekit.core` and :mod:`eaglekit.io`'s file guards only."""
