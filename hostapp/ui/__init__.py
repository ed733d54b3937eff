"""The desktop window (Qt only here): the engine adapter, table models, the progress
delegate, the main window and its dialogs. Started by :mod:`hostapp.app`."""
