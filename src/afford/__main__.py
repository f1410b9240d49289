from afford._entry import main

main()
