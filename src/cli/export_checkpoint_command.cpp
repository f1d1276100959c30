// meshtrain export-checkpoint --checkpoint DIR --out DIR: a training checkpoint (saved under any
// mesh) as an HF model directory (full training) or a PEFT adapter directory (LoRA).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/system_dirs.h"
#include "core/work_gate.h"
#include "train/checkpoint_export.h"
#include "train/run_outputs.h"

namespace mt::cli {

Action add_export_checkpoint_command(CLI::App& app) {
  struct Options {
    std::string checkpoint, out;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("export-checkpoint",
                                 "Write a training checkpoint as an HF model or PEFT adapter directory");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint directory (output.dir/checkpoints/step-N)")
      ->required();
  sub->add_option("--out", o->out, "directory to write")->required();
  return [o] {
    refuse_system_directory(o->out, "--out");
    work_gate::reached("export-checkpoint");
    for (const auto& f : export_checkpoint(o->checkpoint, o->out)) {
      std::cout << "wrote " << f << "\n";
      record_run_output(f, std::cerr);  // train --overwrite of a run directory it lies in removes it
    }
    return 0;
  };
}

}  // namespace mt::cli
