#include "report/tensorboard.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/error.h"

namespace mt::report {
namespace {

namespace fs = std::filesystem;

// Protocol buffer wire format: a key is (field number << 3 | wire type).
enum Wire { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) out += char(uint8_t(v) | 0x80), v >>= 7;
  out += char(uint8_t(v));
}

void put_key(std::string& out, int field, Wire wire) { put_varint(out, uint64_t(field) << 3 | wire); }

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, length_delimited);
  put_varint(out, bytes.size());
  out += bytes;
}

template <class T>
void put_fixed(std::string& out, const T& v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian, as the wire format and this machine are
  out.append(b, sizeof(T));
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
// Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }
std::string event(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, fixed64);
  put_fixed(e, wall_time);
  put_key(e, 2, varint);
  put_varint(e, uint64_t(step));
  return e;
}

void add_scalar(std::string& summary, const std::string& tag, double value) {
  if (!std::isfinite(value)) return;
  std::string v;
  put_bytes(v, 1, tag);
  put_key(v, 2, fixed32);
  put_fixed(v, float(value));
  put_bytes(summary, 1, v);
}

void put_record(std::string& out, const std::string& data) {
  const uint64_t n = data.size();
  std::string length;
  put_fixed(length, n);
  out += length;
  put_fixed(out, masked_crc32c(length.data(), length.size()));
  out += data;
  put_fixed(out, masked_crc32c(data.data(), data.size()));
}

// When the run started, in seconds since the epoch: metrics.jsonl was last written as its last
// step finished, elapsed_s after the start.
double run_start_seconds(const RunData& run) {
  std::error_code ec;
  const auto written = fs::last_write_time(fs::path(run.dir) / "metrics.jsonl", ec);
  double end = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (!ec)
    end = std::chrono::duration<double>(
              std::chrono::file_clock::to_sys(written).time_since_epoch()).count();
  const double elapsed = run.steps.back().elapsed_s;
  return std::isfinite(elapsed) ? end - elapsed : end;
}

}  // namespace

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string write_tensorboard_events(const RunData& run, const std::string& dir) {
  const double start = run_start_seconds(run);
  std::string file;
  std::string first = event(start, 0);
  put_bytes(first, 3, "brain.Event:2");
  put_record(file, first);
  size_t next_segment = 0;
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const StepPoint& p = run.steps[i];
    // The validation loss a segment started from (step 0: before any training), as its own event.
    if (next_segment < run.segments.size() && run.segments[next_segment].first == i) {
      const Segment& seg = run.segments[next_segment++];
      std::string start_summary;
      add_scalar(start_summary, "val/loss", seg.val_loss_start);
      if (!start_summary.empty()) {
        const double before = std::isfinite(p.elapsed_s - p.step_s) ? p.elapsed_s - p.step_s : 0.0;
        std::string e = event(start + before, seg.start_step);
        put_bytes(e, 5, start_summary);
        put_record(file, e);
      }
    }
    std::string summary;
    add_scalar(summary, "train/loss", p.loss);
    add_scalar(summary, "val/loss", p.val_loss);
    add_scalar(summary, "train/lr", p.lr);
    add_scalar(summary, "train/routing_loss", p.routing_loss);  // a mixture of experts'
    add_scalar(summary, "moe/dropped_choices", p.moe_dropped);
    add_scalar(summary, "rewards/accuracies", p.accuracy);  // preference training's, as TRL names them
    add_scalar(summary, "rewards/margins", p.margin);
    add_scalar(summary, "eval/rewards/accuracies", p.val_accuracy);
    add_scalar(summary, "eval/rewards/margins", p.val_margin);
    add_scalar(summary, "perf/tokens_per_s", p.tokens_per_s);
    add_scalar(summary, "perf/mfu", p.mfu);
    add_scalar(summary, "memory/peak_bytes", p.peak_mem_bytes);
    std::string e = event(start + (std::isfinite(p.elapsed_s) ? p.elapsed_s : 0.0), p.step);
    put_bytes(e, 5, summary);
    put_record(file, e);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create directory '" + dir + "': " + ec.message());
  const std::string path = dir + "/events.out.tfevents." + std::to_string(int64_t(start)) + ".meshtrain";
  write_file_atomically(path, [&](std::ostream& os) { os << file; });
  return path;
}

}  // namespace mt::report
