"""``torchconform db upgrade|status``: create or migrate the store's schema."""
from torchconform.config import mask_password
from torchconform.db import migrate
from torchconform.db.store import open_store, upgrade_schema


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


def register(sub):
    p = sub.add_parser("db", help="manage the results database schema")
    dsub = p.add_subparsers(dest="db_command", metavar="ACTION")
    dsub.required = True
    up = dsub.add_parser("upgrade", help="create the schema or migrate it to this tool's version")
    up.add_argument("--db", help="database path or URL (default $TORCHCONFORM_DB or ./torchconform.db)")
    up.set_defaults(func=_upgrade)
    st = dsub.add_parser("status", help="print the schema version of the database and of this tool")
    st.add_argument("--db", help="database path or URL (default $TORCHCONFORM_DB or ./torchconform.db)")
    st.set_defaults(func=_status)
