"""Constants the console script and the command line share (standard library only: the console
script reads them before anything heavy is loaded)."""

#: The console script's name, as usage lines and ``--version`` print it.
PROGRAM = "blowfish-te"
#: The status of an interrupted run, as shells expect (128 + SIGINT).
EXIT_INTERRUPTED = 130
