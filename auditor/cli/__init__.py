"""The command-line door (Typer): ``app`` holds the commands, ``options`` what they share."""
