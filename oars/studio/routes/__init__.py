"""The studio's pages: every module here is one room with an ``APIRouter`` named ``router``, included by
:func:`oars.studio.app.create_app` from the list :data:`oars.studio.app.PAGES` (plain imports: the core resolves no
module name at run time).

Rooms: ``home`` (the front page and the health probe), ``auth`` (login), ``runs`` (the table, compare, a run's
page with live curves, stop, resume), ``train`` (pick a config, edit, check, launch), ``datasets`` (register,
check, browse), ``evaluate`` (a run's evaluation, worst images, confusion matrix), ``exports`` (export, try it,
serve).
"""
