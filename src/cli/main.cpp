// meshtrain: train and fine-tune LLaMA-family models. One file per verb in this directory; the
// command line itself in cli_app.cpp.
#include "cli/cli_app.h"

int main(int argc, char** argv) { return mt::cli::run_cli(argc, argv); }
