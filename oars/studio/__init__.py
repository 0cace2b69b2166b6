"""oars studio: a local web app over the same configs, work dirs and exports the command-line tools use.

FastAPI with server-rendered pages (Jinja2, htmx for live parts, server-sent events for runs); the browser
libraries are vendored under ``static/vendor`` (nothing from a CDN). Its state is the workspace folder: the runs'
own files (``config.yaml``, ``scalars.json``, ``metrics.json``, ``report.html``) and a SQLite index, so a run
started in a terminal shows up too. Optional extra: ``pip install -e .[studio]``; started by ``oars-studio``.

Rooms: :mod:`~oars.studio.app` (the app factory), :mod:`~oars.studio.settings`, :mod:`~oars.studio.security`
(token, CSRF, paths), :mod:`~oars.studio.workspace` (the index of runs and data roots), :mod:`~oars.studio.web`
(what every route uses: templates, the workspace, refusals), :mod:`~oars.studio.routes` (one module a page).
"""
