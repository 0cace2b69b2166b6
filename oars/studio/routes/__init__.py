"""The studio's pages: every module here is one room with an ``APIRouter`` named ``router``, included by
:func:`oars.studio.app.create_app` (found by listing this package, so adding a page touches no other file).

Rooms: ``home`` (the front page and the health probe), ``auth`` (login), ``runs`` (the table, compare, a run's
page with live curves, stop, resume), ``train`` (pick a config, edit, check, launch), ``datasets`` (register, check,
browse), ``evaluate`` (a run's evaluation, worst images, confusion matrix), ``exports`` (export, try it, serve).
"""

import pkgutil

PAGES: tuple[str, ...] = tuple(sorted(module.name for module in pkgutil.iter_modules(__path__)))
