"""The cli lane: the command line and the Python API as a user meets them: exit codes,
one-line errors, standard input, ``--help``, fuzzed inputs, writes that survive a kill, and
the README's and MANUAL's examples run as written."""
