from recipes._cli import entry_point
from recipes.textvqa import main

entry_point(main)
