"""`python -m playground.datasets`: regenerate the built-in datasets in assets/datasets."""

from playground.datasets.write import main

if __name__ == "__main__":
    main()
