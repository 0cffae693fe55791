from drtool.cli.main import main

main()
