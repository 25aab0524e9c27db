// A stand-in host for process_test: spawns `COMMAND ARGS...` with plugin::Process::Spawn,
// writes the child's pid to PID_FILE and waits to be killed.
//
//   spawn_host_main PID_FILE COMMAND [ARGS...]
#include <stdio.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "runtime/plugin/process.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PID_FILE COMMAND [ARGS...]\n", argv[0]);
    return 2;
  }
  ctrlhost::plugin::ProcessSpec spec;
  spec.command = argv[2];
  for (int i = 3; i < argc; ++i) spec.args.push_back(argv[i]);
  auto process = ctrlhost::plugin::Process::Spawn(spec, "plugin-1", [](int) {});
  if (!process.ok()) {
    fprintf(stderr, "%s\n", process.status().ToString().c_str());
    return 1;
  }
  const std::string pid_file = argv[1];
  std::ofstream(pid_file + ".tmp") << (*process)->pid() << "\n";
  if (rename((pid_file + ".tmp").c_str(), pid_file.c_str()) != 0) return 1;
  for (;;) pause();
}
