from recipes._cli import entry_point
from recipes.grounding import main

entry_point(main)
