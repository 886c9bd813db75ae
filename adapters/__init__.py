"""On-disk formats. Each module turns one format into :mod:`inspector.adapters.model` records.

``adapters`` knows bytes and formats, nothing about groups or formulas; :mod:`inspector` builds on
it through :func:`inspector.adapters.registry.load`.
"""
