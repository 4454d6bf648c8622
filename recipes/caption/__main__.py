from recipes import _cli
from recipes.caption import main

_cli.entry_point(main)
