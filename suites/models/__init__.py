"""The model zoo suite: whole models on the device under test, compared to CPU.

``catalog`` lists models per selection, ``hf`` / ``vision`` / ``pyfile`` build
them, ``check`` runs one model (eval, train, compiled) and classifies each run.
"""
