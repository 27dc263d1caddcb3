// aether command-line program (placeholder until the CLI lands).
#include <iostream>

#include "aether/aether.h"

int main() {
  std::cout << "aether\n";
  return 0;
}
