"""Reports: JSON-ready records built from checkpoints and results (:mod:`.listing`), and the
renderers that turn them into table, markdown, JSON and CSV text (:mod:`.render`,
:mod:`.render_diff`). Nothing here reads a file or decides a verdict."""
