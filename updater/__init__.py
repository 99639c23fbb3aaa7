"""The updater: drains the reindex queue the git hooks fill, behind one global lock.

`qmd updater run` drains once, `qmd updater daemon` waits for requests (watchdog) and
drains them in batches, `qmd health` reports the flag a failed step raises. Everything
goes through qmd's public API (`qmd`, `qmd.harness`); the state lives in `qmd.harness.state_dir()`:

    queue/{tmp,new,cur,failed}/   requests (maildir-style spool)
    updater.lock (+ .json)        the global single-updater lock and its holder
    failures/<id>.json            one record per failing (repo, index, step)
    health.json                   the flag: {raised, since, failures, last_success}
    updater/stats.json            runs, documents updated, chunks embedded, the last run
    updater/working.json          the step in progress; one found by the next holder is a death
    logs/                         updater.log (rotating), hooks.log (one line per hook call)
"""
