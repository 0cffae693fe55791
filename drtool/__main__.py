from drtool.cli.entry import main

main()
