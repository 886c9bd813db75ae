from .entry import console_main

if __name__ == "__main__":  # importing the module (documentation tools do) runs nothing
    console_main()
