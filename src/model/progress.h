// Internal: the per-epoch progress bar (a redrawn line on a terminal, plain lines otherwise).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace aether {

class ProgressBar {
 public:
  // `enabled` false prints nothing.
  ProgressBar(int64_t epoch, int64_t epochs, int64_t total_batches, bool enabled);
  // After `done` batches and `images` images: running loss and accuracy (fractions).
  void update(int64_t done, int64_t images, double loss, double accuracy);
  // Stops the clock: the epoch's training ends here, and what follows (the validation) counts in
  // neither seconds() nor the final line's rate and time.
  void stop();
  // Ends the line with a summary tail ("val_loss 0.31  val_acc 89.1%").
  void finish(const std::string& tail);
  double seconds() const;  // since the start, up to stop() once it is called

 private:
  std::string line(int64_t done, int64_t images, double loss, double accuracy, bool final) const;
  int64_t epoch_, epochs_, total_;
  bool enabled_, tty_;
  int64_t last_decile_ = -1;
  int64_t done_ = 0, images_ = 0;
  double loss_ = 0, acc_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::optional<std::chrono::steady_clock::time_point> stop_;
};

}  // namespace aether
