"""The demo world: synthetic drafters and targets in real layout (:mod:`.world`, sized by
:mod:`.spec`; thin quantised targets and hidden-state dumps in :mod:`.targets`; a trained world where
accept lengths mean something in :mod:`.trained`), copies with planted faults (:mod:`.broken`), the search
shelf of look-alike Hub repos (:mod:`.shelf`), and the loopback servers the tests and notebooks read them
through: a Hub-compatible server (:mod:`.hubserver`) on a plain byte-range file server (:mod:`.fileserver`).
Every folder the demo writes is built once and whole by :func:`.build.built_once` (a temporary sibling renamed
into place under a file lock), so pytest workers, notebook kernels and terminals may build it at the same time.
May import :mod:`eaglekit.analysis`, :mod:`eaglekit.io` and :mod:`eaglekit.core`; never the views or the CLI.
The public names (``build_demo``, ``build_trained_demo``, ``HubServer``, ``serve_demo_hub``) are exported
by the package root.
"""
