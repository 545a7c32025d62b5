"""The class leaderboard: a student submits a kernel, the class GPU tests and times it, a
web page ranks it (the CS149 experience; ``shared/seeds/cs149-leaderboard-...txt``).

It uses ``grading``'s judge and measurer unchanged.  Its parts:

- ``boards.py``    which boards exist: one per tune exercise, plus ``histogram`` and
                   ``flash_attention`` at the CS149 shapes (``course/exercises/boards.py``)
- ``store.py``     SQLite (one file, WAL): tokens (hashes only), every submission, its runs;
                   ``ranking.py`` each student's best, ranks, the CSV export
- ``runner.py``    one submission judged: compile gate, tests, the timed launch, all in the
                   measurer process (only gated kernel code runs there)
- ``queue.py``     who runs the queue: a local thread (one GPU), or Dask workers with a
                   ``GPU=1`` resource each; queued work survives a restart
- ``app.py``       the HTTP API (JSON) on Starlette; ``pages.py`` the HTML boards
- ``client.py``    ``course.submit(...)`` and ``python -m course submit``
- ``cli.py``       ``python -m course leaderboard serve | tokens | export``
- ``allowance.py`` what one student may take: judge time in a sliding window, storage
- ``shown.py``     a submission's whole judged unit as text (device functions, constants)
- ``limits.py``    what slow or crowding clients can hold: body deadlines, rates and shares,
                   requests per forwarded address, the port taken before "serving";
                   ``connections.py`` header deadline, shedding idle connections, caps
- ``fromfile.py``  a submitted file's kernel unit, read as data (nothing in the file runs)
"""
