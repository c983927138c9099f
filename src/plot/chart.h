// A small line-chart model and its hand-written SVG: panels side by side, each with axes (log or
// linear), ticks, labels, a legend, and one line with markers per series. plot.cpp turns a report
// into these; nothing here knows about attention.
#pragma once

#include <string>
#include <vector>

namespace flashlab::plot {

struct Point {
  double x, y;
};

struct Series {
  std::string name;
  std::vector<Point> points;
  int style = -1;    // colour and marker; -1: by position in the panel (set it to keep a version's
                     // colour the same in every panel)
  bool line = true;  // false: markers only (a scatter of points that are not a sequence)
  bool markers = true;  // false: the line only (a bound, such as a roofline's roof)
};

enum class Scale { linear, log };
// How tick labels are written: plain numbers, bytes (1 KiB, 16 MiB), seconds (1 ms).
enum class TickStyle { number, bytes, seconds };

struct Axis {
  std::string label;
  Scale scale = Scale::linear;
  TickStyle ticks = TickStyle::number;
  bool ticks_at_data = false;  // x: one tick per distinct data value (N = 512, 1024, ...)
};

struct Panel {
  std::string title;
  Axis x, y;
  std::vector<Series> series;
};

struct Chart {
  std::string title;
  std::string subtitle;
  std::vector<Panel> panels;  // laid out in rows of up to two
};

// A standalone SVG document.
std::string render_svg(const Chart& chart);

}  // namespace flashlab::plot
