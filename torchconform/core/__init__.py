"""The ground floor's shared words: what every component says and none owns.

The outcome record and its classes (``outcome``), numeric error fields (``numeric``), the
breakdown of a build (``breakdown``), the classification rules (``classify``), notes a test
leaves for the record (``notes``, ``traitnotes``, ``perf``), failure signatures
(``clusters``; the categories file: ``category_schema``), the backend profile (``profile``, ``profile_schema``), the YAML reader that
keeps positions (``yamlpos``) and the declared file shapes checked with them (``yamlschema``).  Nothing here imports a component folder: components import
this floor and the components below them (docs/architecture.md).
"""
