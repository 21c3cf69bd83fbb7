"""``torchconform db upgrade|status|check``: create or migrate the store's schema, check it for corruption."""
from torchconform.cli.options import add_db
from torchconform.config import mask_password
from torchconform.db import migrate
from torchconform.db.opening import open_store, upgrade_schema


def _upgrade(args) -> int:
    store = open_store(args.db, check_schema=False)
    try:
        before, after = upgrade_schema(store)
    finally:
        store.close()
    url = mask_password(store.url)
    if before == after:
        print(f"{url}: schema already at {after}")
    else:
        print(f"{url}: schema upgraded from {before or '(empty)'} to {after}")
    return 0


def _status(args) -> int:
    store = open_store(args.db, check_schema=False)
    try:
        with store.read() as conn:
            current = migrate.current_revision(conn)
    finally:
        store.close()
    head = migrate.head()
    state = "up to date" if current == head else ("empty" if current is None else "needs `torchconform db upgrade`"
                                                  if current in migrate.known_revisions() else "newer than this tool")
    print(f"{mask_password(store.url)}: schema {current or '(none)'}, tool {head}: {state}")
    return 0


def _check(args) -> int:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.db.check import check
    from torchconform.db.errors import StoreError
    from torchconform.errors import UserError

    try:
        store = open_store(args.db, create=False, check_schema=False)
    except StoreError as exc:
        if exc.kind == "corrupt":   # too damaged to open: that is the finding
            raise UserError(str(exc), exit_code=1) from None
        raise
    try:
        report = check(store)
    finally:
        store.close()
    if not report.sound:
        more = f" (and {len(report.problems) - 1} more)" if len(report.problems) > 1 else ""
        raise UserError(f"store {report.store} is corrupt: {report.problems[0]}{more}; restore it from a backup"
                        + (f" or salvage what is readable with `sqlite3 {report.store} .recover`"
                           if store.dialect == "sqlite" else ""), exit_code=1)
    print(f"{report.store}: sound ({report.checked}: ok in {report.seconds:.2f} s; "
          f"schema {report.revision or '(none)'})")
    return 0


def register(sub):
    p = sub.add_parser("db", help="manage the results database schema")
    dsub = p.add_subparsers(dest="db_command", metavar="ACTION")
    dsub.required = True
    up = dsub.add_parser("upgrade", help="create the schema or migrate it to this tool's version")
    add_db(up)
    up.set_defaults(func=_upgrade)
    st = dsub.add_parser("status", help="print the schema version of the database and of this tool")
    add_db(st)
    st.set_defaults(func=_status)
    ck = dsub.add_parser("check", help="check the store for corruption (SQLite: PRAGMA integrity_check); "
                                       "exit 1 when it is corrupt")
    add_db(ck)
    ck.set_defaults(func=_check)
