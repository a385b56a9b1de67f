"""``trtbuild cache ls|clear``: list or empty the engine cache of ``trtbuild build --cache DIR``.

    trtbuild cache ls --dir ~/.cache/trtbuild          # digest, model, backend, precision, target, size, last used
    trtbuild cache ls --json                            # the same as JSON (directory from $TRTBUILD_CACHE)
    trtbuild cache clear --dir ~/.cache/trtbuild        # remove every entry

The directory is --dir, else $TRTBUILD_CACHE. Entries are listed most recently used first.
"""

from __future__ import annotations

import argparse
import datetime
import json


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``cache`` with its ``ls`` and ``clear`` actions."""
    p = subparsers.add_parser("cache", help="list or clear the engine cache (trtbuild build --cache DIR)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("ls", "clear"), help="ls: list the entries; clear: remove them all")
    p.add_argument("--dir", "--cache", dest="dir", default=None, metavar="DIR",
                   help="the cache directory, as given to `trtbuild build --cache DIR` (default: $TRTBUILD_CACHE)")
    p.add_argument("--json", action="store_true", help="ls: print the entries as a JSON list")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from trtbuild.engine.cache import CACHE_ENV, EngineCache, cache_dir_from

    from .build import human_bytes

    directory = cache_dir_from(args.dir)
    if directory is None:
        raise ValueError(f"trtbuild cache {args.action}: no cache directory: give --dir DIR or set {CACHE_ENV}")
    cache = EngineCache(directory)
    if args.action == "clear":
        count, freed = cache.clear()
        print(f"cache {cache.dir}: removed {count} entr{'y' if count == 1 else 'ies'} ({human_bytes(freed)})")
        return 0
    entries = cache.ls()
    if args.json:
        print(json.dumps([e.to_dict() for e in entries], indent=2))
        return 0
    total = sum(e.bytes for e in entries)
    print(f"cache {cache.dir}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, {human_bytes(total)} "
          f"of {human_bytes(cache.max_bytes)}")
    for e in entries:
        used = datetime.datetime.fromtimestamp(e.last_used).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{e.digest[:16]}  {e.model or '?'}  {e.backend or '?'}  {e.precision or '?'}  {e.target or '?'}  "
              f"{human_bytes(e.bytes)}  last used {used}")
    return 0
