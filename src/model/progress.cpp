// The per-epoch progress bar: images/s, loss, accuracy and ETA.
#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

namespace aether {
namespace {
std::string clock(double s) {
  const int64_t t = int64_t(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60),
                static_cast<long long>(t % 60));
  return buf;
}
}  // namespace

ProgressBar::ProgressBar(int64_t epoch, int64_t epochs, int64_t total, bool enabled)
    : epoch_(epoch),
      epochs_(epochs),
      total_(total),
      enabled_(enabled),
      tty_(isatty(fileno(stdout)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double ProgressBar::seconds() const {
  return std::chrono::duration<double>(stop_.value_or(std::chrono::steady_clock::now()) - start_).count();
}

void ProgressBar::stop() {
  if (!stop_) stop_ = std::chrono::steady_clock::now();
}

std::string ProgressBar::line(int64_t done, int64_t images, double loss, double acc, bool final) const {
  const double s = seconds();
  const double ips = s > 0 ? double(images) / s : 0;
  std::ostringstream os;
  os << "epoch " << (epoch_ + 1) << "/" << epochs_ << " ";
  if (tty_) {
    constexpr int kWidth = 24;
    const int fill = total_ > 0 ? int(kWidth * done / total_) : kWidth;
    os << '[' << std::string(size_t(fill), '=') << (fill < kWidth ? ">" : "")
       << std::string(size_t(std::max(0, kWidth - fill - 1)), ' ') << "] ";
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lld/%lld  %.0f img/s  loss %.4f  acc %.2f%%", static_cast<long long>(done),
                static_cast<long long>(total_), ips, loss, 100 * acc);
  os << buf;
  if (!final && done > 0 && done < total_) os << "  ETA " << clock(s / double(done) * double(total_ - done));
  if (final) os << "  " << clock(s);
  return os.str();
}

void ProgressBar::update(int64_t done, int64_t images, double loss, double acc) {
  done_ = done;
  images_ = images;
  loss_ = loss;
  acc_ = acc;
  if (!enabled_) return;
  if (tty_) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    std::printf("\r%s\033[K", line(done, images, loss, acc, false).c_str());
  } else {
    const int64_t decile = total_ > 0 ? 10 * done / total_ : 10;
    if (decile == last_decile_ || decile == 10) return;  // the final line comes from finish()
    last_decile_ = decile;
    std::printf("%s\n", line(done, images, loss, acc, false).c_str());
  }
  std::fflush(stdout);
}

void ProgressBar::finish(const std::string& tail) {
  if (!enabled_) return;
  const std::string l = line(done_, images_, loss_, acc_, true) + (tail.empty() ? "" : "  " + tail);
  std::printf(tty_ ? "\r%s\033[K\n" : "%s\n", l.c_str());
  std::fflush(stdout);
}

}  // namespace aether
