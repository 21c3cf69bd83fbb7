"""JUnit XML, both directions, in the outcome record's words: ``write`` renders a run's
records (the ``tc`` attributes carry each record's fields), ``parse`` streams test cases
out of any pytest/JUnit file, ``read`` turns them back into records (ours exactly, foreign
ones classified)."""
