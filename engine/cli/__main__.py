from coevolve_engine.cli import main

main()
