"""`python -m kasir`: the kasir command."""

from kasir.cli import main

main()
