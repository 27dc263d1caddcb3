// Where data sets live: --data-dir, $AETHER_DATA, then per-data-set default directories.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "aether/core/error.h"
#include "aether/data/dataset.h"
#include "core/config.h"

namespace aether::data {
namespace fs = std::filesystem;
namespace {

constexpr int kMaxParentLevels = 8;  // how far up from the current / executable directory to look

bool any_file(const fs::path& dir, const std::vector<std::string>& names) {
  std::error_code ec;
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return fs::is_regular_file(dir / n, ec); });
}

void add_unique(std::vector<fs::path>& out, const fs::path& p) {
  const fs::path q = p.lexically_normal();
  if (std::find(out.begin(), out.end(), q) == out.end()) out.push_back(q);
}

// base/shared/data/<name> for base and each of its parents.
void add_shared_ancestors(std::vector<fs::path>& out, fs::path base, const std::string& name) {
  base = base.lexically_normal();
  for (int i = 0; i < kMaxParentLevels && !base.empty(); ++i) {
    add_unique(out, base / "shared" / "data" / name);
    if (base == base.parent_path()) break;
    base = base.parent_path();
  }
}

}  // namespace

std::string canonical_dataset_name(const std::string& dataset_name) {
  std::string s;
  for (char ch : dataset_name) {
    if (ch != '-' && ch != '_') s += char(std::tolower(static_cast<unsigned char>(ch)));
  }
  if (s == "fashionmnist") return "fashion-mnist";
  if (s == "cifar10") return "cifar-10";
  if (s == "imagefolder" || s == "folder") return "image-folder";
  throw Error(detail::cat("data set: unknown name \"", dataset_name,
                          "\", expected fashion-mnist, cifar-10 or image-folder"));
}

bool has_dataset_files(const std::string& dataset_name, const fs::path& dir) {
  const std::string name = canonical_dataset_name(dataset_name);
  std::error_code ec;
  if (name == "image-folder")
    return fs::is_directory(dir / "train", ec) || fs::is_directory(dir / "test", ec);
  if (name == "fashion-mnist") {
    return any_file(dir, {"train-images-idx3-ubyte.gz", "train-images-idx3-ubyte",
                          "t10k-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte"});
  }
  return any_file(dir, {"data_batch_1.bin", "data_batch_1.bin.xz", "data_batch_1.bin.gz", "test_batch.bin",
                        "test_batch.bin.xz", "test_batch.bin.gz"});
}

fs::path default_download_dir(const std::string& dataset_name) {
  const std::string name = canonical_dataset_name(dataset_name);
  const std::string xdg = config().xdg_data_home.get();
  if (!xdg.empty()) return fs::path(xdg) / "aether" / name;
  const std::string home = config().home.get();
  AETHER_CHECK_RUNTIME(!home.empty(), "default_download_dir", "neither XDG_DATA_HOME nor HOME is set");
  return fs::path(home) / ".local" / "share" / "aether" / name;
}

std::vector<fs::path> data_dir_candidates(const std::string& dataset_name, const std::string& cli_dir) {
  const std::string name = canonical_dataset_name(dataset_name);
  std::vector<fs::path> out;
  const std::string chosen = !cli_dir.empty() ? cli_dir : config().data.get();
  if (!chosen.empty()) {
    add_unique(out, fs::path(chosen));
    add_unique(out, fs::path(chosen) / name);
    return out;
  }
  if (name == "image-folder") return out;  // one's own images: only where --data-dir / AETHER_DATA say
  if (name == "fashion-mnist") add_unique(out, "/usr/share/datasets/fashion-mnist");
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec) add_shared_ancestors(out, cwd, name);
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) add_shared_ancestors(out, exe.parent_path(), name);
  try {
    add_unique(out, default_download_dir(name));
  } catch (const Error&) {
    // no HOME: nothing to add
  }
  return out;
}

fs::path resolve_data_dir(const std::string& dataset_name, const std::string& cli_dir,
                          const std::string& dir_option) {
  const std::vector<fs::path> candidates = data_dir_candidates(dataset_name, cli_dir);
  for (const auto& dir : candidates) {
    if (has_dataset_files(dataset_name, dir)) return dir;
  }
  std::string tried;
  for (const auto& dir : candidates) tried += "\n  " + dir.string();
  const std::string how = !cli_dir.empty()               ? " (from " + dir_option + ")"
                          : !config().data.get().empty() ? " (from AETHER_DATA)"
                                                         : "";
  // How to pass a folder: a flag takes it after a space (--data-dir DIR), a keyword after '='.
  const std::string pass = dir_option + (dir_option.starts_with("--") ? " DIR" : "=DIR");
  const std::string name = canonical_dataset_name(dataset_name);
  if (candidates.empty())  // image-folder without a folder or AETHER_DATA: one line
    throw Error(
        detail::cat("resolve_data_dir: ", name, " has no default folder: pass ", pass, " (or set ",
                    "AETHER_DATA=DIR), a folder holding train/<class>/<image> and test/<class>/<image>"),
        ErrorKind::not_found);
  std::string hint = "\nPass " + pass + " or set AETHER_DATA=DIR";
  if (name == "image-folder") {
    hint += ": a folder holding train/<class>/<image> and test/<class>/<image>";
  } else if (name == "cifar-10") {
    try {
      hint += detail::cat(", or download it with `aether data fetch cifar10` (to ",
                          default_download_dir(name).string(), ")");
    } catch (const Error&) {
      hint += ", or download it with `aether data fetch cifar10`";
    }
  } else {
    hint += " (Debian: apt install dataset-fashion-mnist)";
  }
  throw Error(detail::cat("resolve_data_dir: no ", name, " files found", how, "; tried:", tried, hint),
              ErrorKind::not_found);
}

}  // namespace aether::data
