from afford.cli import main

main()
