"""`python -m recipes.translate`: the recipe as a command-line tool."""

from recipes import _cli
from recipes.translate import main

_cli.entry_point(main)
