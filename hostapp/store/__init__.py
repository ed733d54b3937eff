"""The store layer: what hostapp keeps across restarts.

- :mod:`hostapp.store.paths`: the home directory and the files inside it.
- :mod:`hostapp.store.status`: the operation statuses and their lifecycle.
- :mod:`hostapp.store.journal`: the SQLite operation journal (servers, operations, timelines)
  and its queries; :mod:`~hostapp.store.journal_schema` its schema and migrations,
  :mod:`~hostapp.store.journal_writer` its batching writer thread.
- :mod:`hostapp.store.secrets`: secrets in the OS keyring, referenced from the journal;
  :mod:`~hostapp.store.secret_refs` the references and keyring entry names,
  :mod:`~hostapp.store.secret_shards` handles kept many to one Secret Service entry.
"""
