"""Tokens, pure: the d2t/t2d vocabulary map, tokenizer files and their diff, the bounded chat-template
sandbox, and the draft vocabulary's coverage. Imports only the core's shared modules."""
