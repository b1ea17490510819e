complete --keep-order --exclusive --command axocoatl --arguments "(COMPLETE=fish axocoatl -- (commandline --current-process --tokenize --cut-at-cursor) (commandline --current-token))"
