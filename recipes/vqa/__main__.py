from recipes._cli import entry_point
from recipes.vqa import main

entry_point(main)
