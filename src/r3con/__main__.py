"""`python -m r3con` is the `r3con` command."""

from .cli import main

main()
