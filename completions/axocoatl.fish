# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_axocoatl_global_optspecs
    string join \n C= repo= config= color= h/help V/version
end

function __fish_axocoatl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_axocoatl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_axocoatl_using_subcommand
    set -l cmd (__fish_axocoatl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c axocoatl -n "__fish_axocoatl_needs_command" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_needs_command" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_needs_command" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_needs_command" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "init" -d 'Create a repository: DIR/.axocoatl/ and a starter DIR/axocoatl.yaml.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "validate" -d 'Check a configuration file and report every problem at once.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "send" -d 'Send a message to an agent: one durable turn, streamed to stdout.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "attach" -d 'Attach files as context: immutable references that go along with turns.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "stop" -d 'Stop one exact active turn, by its durable id.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "retry" -d 'Send the request of an earlier turn again, as a new turn linked to it.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "rewind" -d 'Move a session\'s conversation head back to just before TURN.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "sessions" -d 'List sessions, or switch and create them.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "history" -d 'List turns, newest last, optionally searching them.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "show" -d 'Show one turn whole: request, context references, output, tool events, state, usage.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "export" -d 'Export History: a readable transcript (markdown) or every turn with all its records (json).'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "usage" -d 'Report provider-reported token usage per agent, session or day.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "automations" -d 'Scheduled requests: list them, run one now, see their runs, or run what is due.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "fsck" -d 'Check the repository: ledger, objects, checkpoints, memory files, automation run records.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "import" -d 'Import pre-1.0 state: the transcripts of 0.1.x checkpoints into session history.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "memory" -d 'Inspect and edit agent memory: core blocks, the daily log, semantic recall.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "models" -d 'List and fetch the model files axocoatl runs with.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "serve" -d 'Run the agents as long-lived supervised actors, in the foreground.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "agents" -d 'See and steer the agents of the running `axocoatl serve`.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "mcp" -d 'The Model Context Protocol both ways: agents use MCP servers\' tools, and this repository is served to other agents.'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "util" -d 'Maintenance commands'
complete -c axocoatl -n "__fish_axocoatl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand init" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand init" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand init" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand init" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand init" -l json -d 'Print the result as JSON'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand init" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand init" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand validate" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand validate" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand validate" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand validate" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand validate" -l json -d 'Print JSON Lines: one object per diagnostic, then a summary object'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand validate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand validate" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -s s -l session -d 'The session [default: HEAD, initially `main`]; a new name creates the session' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -s a -l agent -d 'The agent [default: default_agent, else the first autonomous agent]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -l attach -d 'Attach FILE to this turn only (once-scoped; repeatable)' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -l json -d 'Write JSON Lines events to stdout instead of text'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -l wait -d 'Queue behind an active turn of the session instead of failing'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -l no-stdin -d 'Never read stdin (for scripts whose stdin stays open)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand send" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -f -a "add" -d 'Attach files to a session; prints one reference id per file.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -f -a "list" -d 'List the references selected for the next turn of a session.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -f -a "rm" -d 'Remove a reference from future selection.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -f -a "cat" -d 'Write a reference\'s original bytes (or its extracted text) to stdout.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and not __fish_seen_subcommand_from add list rm cat help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from add" -l scope -d 'How long the references stay selected' -r -f -a "once\t'The next turn of the session, then consumed'
session\t'Every turn of the session until removed'"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from add" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from add" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from add" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from add" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from add" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from add" -l json -d 'Print one JSON object per reference'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from add" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from list" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from list" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from list" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from list" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from list" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from list" -l all -d 'Also the consumed and removed references'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from list" -l json -d 'Print JSON Lines, one object per reference'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from rm" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from rm" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from rm" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from rm" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from rm" -l json -d 'Print the removed reference as a JSON object'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from rm" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from cat" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from cat" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from cat" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from cat" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from cat" -l text -d 'The extracted text instead of the original bytes'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from cat" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from cat" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from help" -f -a "add" -d 'Attach files to a session; prints one reference id per file.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the references selected for the next turn of a session.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from help" -f -a "rm" -d 'Remove a reference from future selection.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from help" -f -a "cat" -d 'Write a reference\'s original bytes (or its extracted text) to stdout.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand attach; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand stop" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand stop" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand stop" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand stop" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand stop" -l wait -d 'Wait until the turn\'s terminal state is recorded, and print it'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand stop" -l json -d 'Print the result as JSON'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand stop" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand stop" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand retry" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand retry" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand retry" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand retry" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand retry" -l json -d 'Write JSON Lines events to stdout instead of text'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand retry" -l wait -d 'Queue behind an active turn of the session instead of failing'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand retry" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand retry" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -s s -l session -d 'The session the turn must belong to [default: the turn\'s own session]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -s y -l yes -d 'Do not ask for confirmation'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -l edit -d 'Open $EDITOR on the earlier request and send the result as a new turn'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -l json -d 'Print the result as JSON (the request is in `prefill`)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand rewind" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -l json -d 'Print JSON Lines, one object per session'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -f -a "switch" -d 'Make NAME the current session (HEAD)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -f -a "new" -d 'Create session NAME and make it current'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and not __fish_seen_subcommand_from switch new help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from switch" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from switch" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from switch" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from switch" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from switch" -s c -l create -d 'Create the session if it does not exist'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from switch" -s h -l help -d 'Print help'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from switch" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from new" -l agents -d 'The autonomous agents of a multi-agent session, comma-separated (at least two)' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from new" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from new" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from new" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from new" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from new" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from new" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "switch" -d 'Make NAME the current session (HEAD)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "new" -d 'Create session NAME and make it current'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -l search -d 'Only turns containing TEXT (literal, case-insensitive)' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -l limit -d 'Only the newest N turns' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -l all -d 'Every session'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -l json -d 'Print JSON Lines, one object per turn'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand history" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand show" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand show" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand show" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand show" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand show" -l json -d 'Print the turn as one JSON object'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand show" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -l format -r -f -a "markdown\t''
json\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -s o -l output -d 'Write to FILE instead of stdout' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -l all -d 'Every session'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand export" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -l by -d 'Group rows by agent, session or day (UTC)' -r -f -a "agent\t''
session\t''
day\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -l all -d 'Every session'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -l json -d 'Print JSON Lines: one object per row, then a total'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand usage" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -f -a "list" -d 'List the automations with their next occurrence (local and UTC) and last run.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -f -a "tick" -d 'Run every due occurrence once, then exit (for system cron).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -f -a "run" -d 'Run an automation now (recorded as a manual run), streaming its output.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -f -a "runs" -d 'Show the run history: occurrence, claim time, runner, turn, outcome, duration.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and not __fish_seen_subcommand_from list tick run runs help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from list" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from list" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from list" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from list" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from list" -l json -d 'Print JSON Lines, one object per automation'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from tick" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from tick" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from tick" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from tick" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from tick" -l json -d 'Print JSON Lines, one object per recorded run'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from tick" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from tick" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from run" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from run" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from run" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from run" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from run" -l wait -d 'Wait for a running occurrence of it to end instead of refusing'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from run" -l json -d 'Print the run record as JSON instead of streaming the output'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from run" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from runs" -l limit -d 'Only the newest N runs' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from runs" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from runs" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from runs" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from runs" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from runs" -l json -d 'Print JSON Lines, one object per run'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from runs" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from runs" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the automations with their next occurrence (local and UTC) and last run.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from help" -f -a "tick" -d 'Run every due occurrence once, then exit (for system cron).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from help" -f -a "run" -d 'Run an automation now (recorded as a manual run), streaming its output.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from help" -f -a "runs" -d 'Show the run history: occurrence, claim time, runner, turn, outcome, duration.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand automations; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand fsck" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand fsck" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand fsck" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand fsck" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand fsck" -l repair -d 'Repair what a crash or a full disk leaves behind (nothing else is ever changed)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand fsck" -l json -d 'Print JSON Lines: one object per finding, then a summary'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand fsck" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand fsck" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand import" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand import" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand import" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand import" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand import" -s n -l dry-run -d 'Show what would be imported; write nothing'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand import" -l json -d 'Print JSON Lines: one object per checkpoint and per other input, then a summary'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand import" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand import" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -s a -l agent -d 'The agent [default: default_agent, else the first autonomous agent]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -f -a "core" -d 'Show or edit core memory: the named blocks injected into every turn.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -f -a "log" -d 'Show the daily log: the agent\'s requests, answers, tool calls and memory edits.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -f -a "search" -d 'Search semantic memory for records close in meaning to QUERY.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -f -a "add" -d 'Add text to semantic memory (from the argument, or stdin when it is absent or `-`).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -f -a "status" -d 'Show what memory holds and which recall path (neural or lexical) is in use, and why.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -f -a "reindex" -d 'Rebuild the search data of semantic memory from its records\' text.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -f -a "consolidate" -d 'Promote durable facts from recent semantic memory into core blocks (sleep-time consolidation).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and not __fish_seen_subcommand_from core log search add status reindex consolidate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -s a -l agent -d 'The agent [default: default_agent, else the first autonomous agent]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -f -a "show" -d 'Show every block, or only the value of LABEL'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -f -a "set" -d 'Set a block\'s whole value (VALUE `-` or absent: read stdin)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -f -a "append" -d 'Append a line to a block (TEXT `-` or absent: read stdin)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -f -a "replace" -d 'Replace the one occurrence of OLD in a block with NEW'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from core" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -l from -d 'Start of the range [default: today, UTC]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -l to -d 'End of the range, inclusive [default: no end]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -l query -d 'Only records containing TEXT (case-insensitive)' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -l limit -d 'At most N records, oldest first' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -s a -l agent -d 'The agent [default: default_agent, else the first autonomous agent]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from log" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -l top-k -d 'How many records [default: the agent\'s memory.recall.top_k]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -s a -l agent -d 'The agent [default: default_agent, else the first autonomous agent]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -l include-superseded -d 'Also find the exchanges of turns a rewind superseded (marked as such)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from search" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from add" -s a -l agent -d 'The agent [default: default_agent, else the first autonomous agent]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from add" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from add" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from add" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from add" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from add" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from add" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from add" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from status" -s a -l agent -d 'The agent [default: default_agent, else the first autonomous agent]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from status" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from status" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from status" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from status" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from status" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from status" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from reindex" -s a -l agent -d 'The agent [default: default_agent, else the first autonomous agent]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from reindex" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from reindex" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from reindex" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from reindex" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from reindex" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from reindex" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from reindex" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from reindex" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from consolidate" -s a -l agent -d 'The agent [default: default_agent, else the first autonomous agent]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from consolidate" -s s -l session -d 'The session [default: HEAD]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from consolidate" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from consolidate" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from consolidate" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from consolidate" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from consolidate" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from consolidate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from consolidate" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from help" -f -a "core" -d 'Show or edit core memory: the named blocks injected into every turn.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from help" -f -a "log" -d 'Show the daily log: the agent\'s requests, answers, tool calls and memory edits.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from help" -f -a "search" -d 'Search semantic memory for records close in meaning to QUERY.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add text to semantic memory (from the argument, or stdin when it is absent or `-`).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from help" -f -a "status" -d 'Show what memory holds and which recall path (neural or lexical) is in use, and why.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from help" -f -a "reindex" -d 'Rebuild the search data of semantic memory from its records\' text.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from help" -f -a "consolidate" -d 'Promote durable facts from recent semantic memory into core blocks (sleep-time consolidation).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand memory; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -f -a "list" -d 'List the known models: what each is for, where its files are read from and whether they are there and verified (their sha256 is the one axocoatl knows).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -f -a "fetch" -d 'Download and install a model\'s files (every known model\'s without NAME).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and not __fish_seen_subcommand_from list fetch help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from list" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from list" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from list" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from list" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from list" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from fetch" -l index-url -d 'The package index to download from (its simple API) [default: https://pypi.org/simple]' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from fetch" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from fetch" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from fetch" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from fetch" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from fetch" -s q -l quiet -d 'Print no progress (errors still go to standard error)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from fetch" -l json -d 'Print JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from fetch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from fetch" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the known models: what each is for, where its files are read from and whether they are there and verified (their sha256 is the one axocoatl knows).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from help" -f -a "fetch" -d 'Download and install a model\'s files (every known model\'s without NAME).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand models; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand serve" -l log-format -d 'The format of the logs on stderr' -r -f -a "text\t'One line per event, for people'
json\t'One JSON object per line, for log collectors'"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand serve" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand serve" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand serve" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand serve" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand serve" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -f -a "list" -d 'One line per actor: agent, session, state, pid, restarts, last turn.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -f -a "status" -d 'Each actor (of agent ID, or all) with its last error, and serve\'s automation schedule.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -f -a "restart" -d 'Restart agent ID\'s actors from their latest checkpoints (also brings a down agent back).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -f -a "set" -d 'Patch agent ID in serve\'s memory and restart it: KEY is a field of the agent as in axocoatl.yaml (dotted for nested ones). The YAML file is not changed.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and not __fish_seen_subcommand_from list status restart set help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from list" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from list" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from list" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from list" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from list" -l json -d 'One JSON object per actor'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from status" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from status" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from status" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from status" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from status" -l json -d 'One JSON object per actor (`type: actor`), then per automation (`type: automation`)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from restart" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from restart" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from restart" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from restart" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from restart" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from restart" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from set" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from set" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from set" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from set" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from set" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from set" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from help" -f -a "list" -d 'One line per actor: agent, session, state, pid, restarts, last turn.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from help" -f -a "status" -d 'Each actor (of agent ID, or all) with its last error, and serve\'s automation schedule.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from help" -f -a "restart" -d 'Restart agent ID\'s actors from their latest checkpoints (also brings a down agent back).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from help" -f -a "set" -d 'Patch agent ID in serve\'s memory and restart it: KEY is a field of the agent as in axocoatl.yaml (dotted for nested ones). The YAML file is not changed.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand agents; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and not __fish_seen_subcommand_from list serve help" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and not __fish_seen_subcommand_from list serve help" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and not __fish_seen_subcommand_from list serve help" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and not __fish_seen_subcommand_from list serve help" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and not __fish_seen_subcommand_from list serve help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and not __fish_seen_subcommand_from list serve help" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and not __fish_seen_subcommand_from list serve help" -f -a "list" -d 'Start each MCP server of axocoatl.yaml, and list its state and its tools.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and not __fish_seen_subcommand_from list serve help" -f -a "serve" -d 'Serve this repository to other agents over MCP on stdin and stdout.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and not __fish_seen_subcommand_from list serve help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from list" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from list" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from list" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from list" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from list" -l json -d 'Print JSON Lines, one object per server'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from serve" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from serve" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from serve" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from serve" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from serve" -l read-only -d 'Offer only the tools that read (no `send`, no `stop`)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from serve" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from help" -f -a "list" -d 'Start each MCP server of axocoatl.yaml, and list its state and its tools.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from help" -f -a "serve" -d 'Serve this repository to other agents over MCP on stdin and stdout.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand mcp; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -s h -l help -d 'Print help'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -f -a "generate" -d 'Write man pages and shell completions (man/ and completions/ of the source tree)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -f -a "ledger-append" -d 'Append test records to the ledger, printing each sequence number once it is durable'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -f -a "ledger-dump" -d 'Print every record as `SEQ KIND [TEXT]`; damage is reported on stderr'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -f -a "embedder" -d 'Make the embedder\'s ready-to-run file when it is missing, stale or damaged (as the first command needing the embedder would), and print which engine runs and from which file. scripts/fetch-embedder.sh and the memory benchmark run it'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -f -a "checkpoints" -d 'Print the checkpoints of SESSION:AGENT, newest first, as JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -f -a "actor" -d 'An actor of `axocoatl serve` (started by serve only: its configuration comes as one JSON line on stdin; `ready` or `error JSON` on stdout)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and not __fish_seen_subcommand_from generate ledger-append ledger-dump embedder checkpoints actor help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from generate" -l out -d 'The directory that receives man/ and completions/' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from generate" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from generate" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from generate" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from generate" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from generate" -s h -l help -d 'Print help'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from generate" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -l count -d 'How many records' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -l size -d 'Payload bytes per record' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -l tag -d 'A tag put at the start of each payload' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -l batch -d 'Records per append call (one fsync each)' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -l print -d 'Print `SEQ TAG:INDEX` after each durable append'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -s h -l help -d 'Print help'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-append" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-dump" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-dump" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-dump" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-dump" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-dump" -s h -l help -d 'Print help'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from ledger-dump" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from embedder" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from embedder" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from embedder" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from embedder" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from embedder" -s h -l help -d 'Print help'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from embedder" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from checkpoints" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from checkpoints" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from checkpoints" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from checkpoints" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from checkpoints" -s h -l help -d 'Print help'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from checkpoints" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -l session -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -l agent -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -l socket -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -l parent -d 'The pid of the serve that starts it' -r
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -l log-format -d 'Its logs (on stderr, shared with serve): serve\'s format' -r -f -a "text\t'One line per event, for people'
json\t'One JSON object per line, for log collectors'"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -s C -d 'Run as if started in DIR' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -l repo -d 'The repository: a `.axocoatl` directory or the directory holding it' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -l config -d 'The configuration file [default: axocoatl.yaml beside .axocoatl/]' -r -F
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -l color -d 'When to color output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from actor" -s V -l version -d 'Print version'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from help" -f -a "generate" -d 'Write man pages and shell completions (man/ and completions/ of the source tree)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from help" -f -a "ledger-append" -d 'Append test records to the ledger, printing each sequence number once it is durable'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from help" -f -a "ledger-dump" -d 'Print every record as `SEQ KIND [TEXT]`; damage is reported on stderr'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from help" -f -a "embedder" -d 'Make the embedder\'s ready-to-run file when it is missing, stale or damaged (as the first command needing the embedder would), and print which engine runs and from which file. scripts/fetch-embedder.sh and the memory benchmark run it'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from help" -f -a "checkpoints" -d 'Print the checkpoints of SESSION:AGENT, newest first, as JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from help" -f -a "actor" -d 'An actor of `axocoatl serve` (started by serve only: its configuration comes as one JSON line on stdin; `ready` or `error JSON` on stdout)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand util; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "init" -d 'Create a repository: DIR/.axocoatl/ and a starter DIR/axocoatl.yaml.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "validate" -d 'Check a configuration file and report every problem at once.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "send" -d 'Send a message to an agent: one durable turn, streamed to stdout.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "attach" -d 'Attach files as context: immutable references that go along with turns.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "stop" -d 'Stop one exact active turn, by its durable id.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "retry" -d 'Send the request of an earlier turn again, as a new turn linked to it.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "rewind" -d 'Move a session\'s conversation head back to just before TURN.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "sessions" -d 'List sessions, or switch and create them.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "history" -d 'List turns, newest last, optionally searching them.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "show" -d 'Show one turn whole: request, context references, output, tool events, state, usage.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "export" -d 'Export History: a readable transcript (markdown) or every turn with all its records (json).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "usage" -d 'Report provider-reported token usage per agent, session or day.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "automations" -d 'Scheduled requests: list them, run one now, see their runs, or run what is due.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "fsck" -d 'Check the repository: ledger, objects, checkpoints, memory files, automation run records.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "import" -d 'Import pre-1.0 state: the transcripts of 0.1.x checkpoints into session history.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "memory" -d 'Inspect and edit agent memory: core blocks, the daily log, semantic recall.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "models" -d 'List and fetch the model files axocoatl runs with.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "serve" -d 'Run the agents as long-lived supervised actors, in the foreground.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "agents" -d 'See and steer the agents of the running `axocoatl serve`.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "mcp" -d 'The Model Context Protocol both ways: agents use MCP servers\' tools, and this repository is served to other agents.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "util" -d 'Maintenance commands'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and not __fish_seen_subcommand_from init validate send attach stop retry rewind sessions history show export usage automations fsck import memory models serve agents mcp util help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from attach" -f -a "add" -d 'Attach files to a session; prints one reference id per file.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from attach" -f -a "list" -d 'List the references selected for the next turn of a session.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from attach" -f -a "rm" -d 'Remove a reference from future selection.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from attach" -f -a "cat" -d 'Write a reference\'s original bytes (or its extracted text) to stdout.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "switch" -d 'Make NAME the current session (HEAD)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "new" -d 'Create session NAME and make it current'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from automations" -f -a "list" -d 'List the automations with their next occurrence (local and UTC) and last run.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from automations" -f -a "tick" -d 'Run every due occurrence once, then exit (for system cron).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from automations" -f -a "run" -d 'Run an automation now (recorded as a manual run), streaming its output.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from automations" -f -a "runs" -d 'Show the run history: occurrence, claim time, runner, turn, outcome, duration.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from memory" -f -a "core" -d 'Show or edit core memory: the named blocks injected into every turn.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from memory" -f -a "log" -d 'Show the daily log: the agent\'s requests, answers, tool calls and memory edits.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from memory" -f -a "search" -d 'Search semantic memory for records close in meaning to QUERY.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from memory" -f -a "add" -d 'Add text to semantic memory (from the argument, or stdin when it is absent or `-`).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from memory" -f -a "status" -d 'Show what memory holds and which recall path (neural or lexical) is in use, and why.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from memory" -f -a "reindex" -d 'Rebuild the search data of semantic memory from its records\' text.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from memory" -f -a "consolidate" -d 'Promote durable facts from recent semantic memory into core blocks (sleep-time consolidation).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from models" -f -a "list" -d 'List the known models: what each is for, where its files are read from and whether they are there and verified (their sha256 is the one axocoatl knows).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from models" -f -a "fetch" -d 'Download and install a model\'s files (every known model\'s without NAME).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from agents" -f -a "list" -d 'One line per actor: agent, session, state, pid, restarts, last turn.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from agents" -f -a "status" -d 'Each actor (of agent ID, or all) with its last error, and serve\'s automation schedule.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from agents" -f -a "restart" -d 'Restart agent ID\'s actors from their latest checkpoints (also brings a down agent back).'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from agents" -f -a "set" -d 'Patch agent ID in serve\'s memory and restart it: KEY is a field of the agent as in axocoatl.yaml (dotted for nested ones). The YAML file is not changed.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from mcp" -f -a "list" -d 'Start each MCP server of axocoatl.yaml, and list its state and its tools.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from mcp" -f -a "serve" -d 'Serve this repository to other agents over MCP on stdin and stdout.'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from util" -f -a "generate" -d 'Write man pages and shell completions (man/ and completions/ of the source tree)'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from util" -f -a "ledger-append" -d 'Append test records to the ledger, printing each sequence number once it is durable'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from util" -f -a "ledger-dump" -d 'Print every record as `SEQ KIND [TEXT]`; damage is reported on stderr'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from util" -f -a "embedder" -d 'Make the embedder\'s ready-to-run file when it is missing, stale or damaged (as the first command needing the embedder would), and print which engine runs and from which file. scripts/fetch-embedder.sh and the memory benchmark run it'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from util" -f -a "checkpoints" -d 'Print the checkpoints of SESSION:AGENT, newest first, as JSON Lines'
complete -c axocoatl -n "__fish_axocoatl_using_subcommand help; and __fish_seen_subcommand_from util" -f -a "actor" -d 'An actor of `axocoatl serve` (started by serve only: its configuration comes as one JSON line on stdin; `ready` or `error JSON` on stdout)'
