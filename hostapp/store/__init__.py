"""The store layer: what hostapp keeps across restarts.

- :mod:`hostapp.store.paths`: the home directory and the files inside it.
- :mod:`hostapp.store.journal`: the SQLite operation journal (servers, operations, timelines).
- :mod:`hostapp.store.secrets`: secrets in the OS keyring, referenced from the journal.
"""
