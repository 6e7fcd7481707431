// A line chart as a standalone SVG document: axes with ticks and labels, a title, a legend, one
// polyline with markers per series. Private to remat's tools and benchmarks (remat-solve --plot,
// benchmarks/quality.cpp); it knows nothing of chains, only of points.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::tools::svg {

struct point {
  double x = 0;
  double y = 0;
};

struct series {
  std::string label;
  std::vector<point> points;  ///< in increasing x; only the points that exist (no gaps)
  bool emphasized = false;    ///< drawn thicker, on top of the others
  /// A step function: each point's y holds up to the next point's x (and the last one's up to
  /// `steps_until`, where that is further right). Its markers are left out when it has more
  /// points than `max_step_markers`, where they would hide the line.
  bool steps = false;
  std::optional<double> steps_until;
};

inline constexpr std::size_t max_step_markers = 120;

struct chart {
  std::string title;
  std::string subtitle;
  std::string x_label;
  std::string y_label;
  std::vector<series> lines;
  /// Axis ranges the ticks must cover, whatever the data (e.g. y = 1, the reference).
  std::vector<point> always_show;
  /// When set, the y axis stops here: a point above is drawn on the top edge as an arrow with its
  /// value, so that one far-off series does not flatten the others.
  std::optional<double> y_max;
  /// Said in the legend for a series without points.
  std::string empty_note = "no points";
};

namespace detail {

inline std::string escape(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0.
        if (static_cast<unsigned char>(ch) >= 0x20 || ch == '\t' || ch == '\n') out += ch;
    }
  }
  return out;
}

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// Ticks at a "nice" step (1, 2 or 5 times a power of ten) covering [lo, hi] in about `count`
// intervals; the axis is widened to the first and last tick.
struct ticks {
  double first = 0;
  double last = 1;
  double step = 1;
  int decimals = 0;
};

inline ticks nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * magnitude;
    if (raw <= step) break;
  }
  ticks t;
  t.step = step;
  t.first = std::floor(lo / step + 1e-9) * step;
  t.last = std::ceil(hi / step - 1e-9) * step;
  t.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  if (std::fabs(step / std::pow(10.0, -t.decimals) - 2.5) < 1e-9) ++t.decimals;
  return t;
}

inline std::string tick_label(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::fabs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

// Colour-blind-safe qualitative colours (Okabe and Ito), then darker extras; the marker shape
// changes too, so that no two series need colour to be told apart.
inline constexpr std::string_view palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                               "#E69F00", "#56B4E9", "#000000", "#8C564B",
                                               "#7F7F7F", "#BCBD22"};

// Marker `index % 5` (circle, square, triangle, diamond, ring) centred on (x, y), with a tooltip
// when `tooltip` is not empty.
inline std::string marker(std::size_t index, double x, double y, std::string_view colour,
                          std::string_view tooltip = {}) {
  const std::string c(colour);
  const double r = 3.6;
  std::string element, attributes;
  switch (index % 5) {
    case 0:
      element = "circle";
      attributes =
          "cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"" + num(r) + "\" fill=\"" + c + "\"";
      break;
    case 1:
      element = "rect";
      attributes = "x=\"" + num(x - r) + "\" y=\"" + num(y - r) + "\" width=\"" + num(2 * r) +
                   "\" height=\"" + num(2 * r) + "\" fill=\"" + c + "\"";
      break;
    case 2:
      element = "polygon";
      attributes = "points=\"" + num(x) + "," + num(y - 1.2 * r) + " " + num(x + 1.1 * r) + "," +
                   num(y + 0.8 * r) + " " + num(x - 1.1 * r) + "," + num(y + 0.8 * r) +
                   "\" fill=\"" + c + "\"";
      break;
    case 3:
      element = "polygon";
      attributes = "points=\"" + num(x) + "," + num(y - 1.3 * r) + " " + num(x + 1.3 * r) + "," +
                   num(y) + " " + num(x) + "," + num(y + 1.3 * r) + " " + num(x - 1.3 * r) + "," +
                   num(y) + "\" fill=\"" + c + "\"";
      break;
    default:
      element = "circle";
      attributes = "cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"" + num(r) +
                   "\" fill=\"white\" stroke=\"" + c + "\" stroke-width=\"1.6\"";
  }
  if (tooltip.empty()) return "<" + element + " " + attributes + "/>";
  return "<" + element + " " + attributes + "><title>" + escape(tooltip) + "</title></" + element +
         ">";
}

}  // namespace detail

/// The chart as an SVG document (UTF-8 text). Every series gets exactly one `<polyline>`, empty
/// when it has no points.
inline std::string render(const chart& c) {
  using detail::num;
  constexpr double width = 960, height = 580;
  constexpr double left = 84, right = 220, top = 78, bottom = 66;
  constexpr double plot_w = width - left - right, plot_h = height - top - bottom;

  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  bool any = false;
  const auto clipped = [&](const point& p) { return c.y_max && p.y > *c.y_max; };
  const auto cover = [&](point p) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) return;
    if (clipped(p)) p.y = *c.y_max;
    if (!any) {
      x_lo = x_hi = p.x;
      y_lo = y_hi = p.y;
      any = true;
    }
    x_lo = std::min(x_lo, p.x);
    x_hi = std::max(x_hi, p.x);
    y_lo = std::min(y_lo, p.y);
    y_hi = std::max(y_hi, p.y);
  };
  for (const series& s : c.lines)
    for (const point& p : s.points) cover(p);
  for (const series& s : c.lines)
    if (s.steps && s.steps_until && !s.points.empty()) cover({*s.steps_until, s.points.back().y});
  for (const point& p : c.always_show) cover(p);
  const detail::ticks xt = detail::nice_ticks(x_lo, x_hi, 8);
  const detail::ticks yt = detail::nice_ticks(y_lo, y_hi, 7);
  // A little room inside the frame, so that points on the first or last tick are not on it.
  constexpr double inset = 0.025;
  const auto scale = [&](const detail::ticks& t, double v) {
    return (inset + (v - t.first) / (t.last - t.first) * (1 - 2 * inset));
  };
  const auto sx = [&](double x) { return left + scale(xt, x) * plot_w; };
  const auto sy = [&](double y) { return top + plot_h - scale(yt, y) * plot_h; };

  std::string o;
  o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" +
       num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
       "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  o += "<title>" + detail::escape(c.title) + "</title>\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + num(left) +
       "\" y=\"32\" font-size=\"19\" font-weight=\"bold\" fill=\"#222\">" +
       detail::escape(c.title) + "</text>\n";
  if (!c.subtitle.empty())
    o += "<text x=\"" + num(left) + "\" y=\"54\" font-size=\"13\" fill=\"#555\">" +
         detail::escape(c.subtitle) + "</text>\n";

  // Grid and ticks.
  o += "<g font-size=\"12\" fill=\"#333\">\n";
  const auto tick_count = [](const detail::ticks& t) {
    return static_cast<int>(std::lround((t.last - t.first) / t.step));
  };
  for (int k = 0; k <= tick_count(xt); ++k) {
    const double v = xt.first + k * xt.step;
    const double x = sx(v);
    o += "<line x1=\"" + num(x) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x) + "\" y2=\"" +
         num(top + plot_h) + "\" stroke=\"#e4e4e4\"/>\n";
    o += "<line x1=\"" + num(x) + "\" y1=\"" + num(top + plot_h) + "\" x2=\"" + num(x) +
         "\" y2=\"" + num(top + plot_h + 5) + "\" stroke=\"#444\"/>\n";
    o += "<text x=\"" + num(x) + "\" y=\"" + num(top + plot_h + 20) + "\" text-anchor=\"middle\">" +
         detail::tick_label(v, xt.decimals) + "</text>\n";
  }
  for (int k = 0; k <= tick_count(yt); ++k) {
    const double v = yt.first + k * yt.step;
    const double y = sy(v);
    o += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(left + plot_w) +
         "\" y2=\"" + num(y) + "\" stroke=\"#e4e4e4\"/>\n";
    o += "<line x1=\"" + num(left - 5) + "\" y1=\"" + num(y) + "\" x2=\"" + num(left) + "\" y2=\"" +
         num(y) + "\" stroke=\"#444\"/>\n";
    o += "<text x=\"" + num(left - 9) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" +
         detail::tick_label(v, yt.decimals) + "</text>\n";
  }
  o += "</g>\n";
  o += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(plot_w) +
       "\" height=\"" + num(plot_h) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  o += "<text x=\"" + num(left + plot_w / 2) + "\" y=\"" + num(height - 18) +
       "\" font-size=\"14\" text-anchor=\"middle\" fill=\"#222\">" + detail::escape(c.x_label) +
       "</text>\n";
  o += "<text transform=\"translate(24 " + num(top + plot_h / 2) +
       ") rotate(-90)\" font-size=\"14\" text-anchor=\"middle\" fill=\"#222\">" +
       detail::escape(c.y_label) + "</text>\n";

  // Lines: the emphasized ones last, so that they are on top.
  std::vector<std::size_t> order(c.lines.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_partition(order.begin(), order.end(),
                        [&](std::size_t k) { return !c.lines[k].emphasized; });
  for (const std::size_t k : order) {
    const series& s = c.lines[k];
    const std::string_view colour = detail::palette[k % std::size(detail::palette)];
    // A clipped point sits on the frame's top edge.
    const auto py = [&](const point& p) { return clipped(p) ? top : sy(p.y); };
    std::string pts;
    // Appended piece by piece: g++ 12 at -O3 warns (-Wrestrict, a false positive, GCC bug
    // 105329 and its kin) about the memcpy of `const char* + std::string` temporaries here.
    const auto vertex = [&](const point& p) {
      if (!pts.empty()) pts += ' ';
      pts += num(sx(p.x));
      pts += ',';
      pts += num(py(p));
    };
    for (std::size_t n = 0; n < s.points.size(); ++n) {
      if (s.steps && n > 0) vertex({s.points[n].x, s.points[n - 1].y});
      vertex(s.points[n]);
    }
    if (s.steps && s.steps_until && !s.points.empty() && *s.steps_until > s.points.back().x)
      vertex({*s.steps_until, s.points.back().y});
    const bool markers = !s.steps || s.points.size() <= max_step_markers;
    o += "<g>\n<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + std::string(colour) +
         "\" stroke-width=\"" + (s.emphasized ? "2.8" : "1.7") +
         "\" stroke-linejoin=\"round\" stroke-opacity=\"0.9\"><title>" + detail::escape(s.label) +
         "</title></polyline>\n";
    std::string last_label;
    for (const point& p : s.points) {
      if (!markers) break;
      const std::string tip =
          s.label + ": x " + detail::tick_label(p.x, 3) + ", y " + detail::tick_label(p.y, 4);
      if (!clipped(p)) {
        if (markers) o += detail::marker(k, sx(p.x), sy(p.y), colour, tip) + "\n";
        continue;
      }
      const double x = sx(p.x);
      o += "<polygon points=\"" + num(x) + "," + num(top - 7) + " " + num(x + 5) + "," +
           num(top + 2) + " " + num(x - 5) + "," + num(top + 2) + "\" fill=\"" +
           std::string(colour) + "\"><title>" + detail::escape(tip) + "</title></polygon>\n";
      // One label per run of equal values (a flat series off the chart is labelled once).
      const std::string value = detail::tick_label(p.y, 2);
      if (value == last_label) continue;
      last_label = value;
      o += "<text x=\"" + num(x + 7) + "\" y=\"" + num(top - 2) + "\" font-size=\"11\" fill=\"" +
           std::string(colour) + "\">" + value + "</text>\n";
    }
    o += "</g>\n";
  }

  // Legend, right of the plot.
  const double lx = left + plot_w + 22;
  double ly = top + 8;
  o += "<g font-size=\"13\" fill=\"#222\">\n";
  for (std::size_t k = 0; k < c.lines.size(); ++k) {
    const series& s = c.lines[k];
    const std::string_view colour = detail::palette[k % std::size(detail::palette)];
    o += "<line x1=\"" + num(lx) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(lx + 30) + "\" y2=\"" +
         num(ly) + "\" stroke=\"" + std::string(colour) + "\" stroke-width=\"" +
         (s.emphasized ? "2.8" : "1.7") + "\"/>\n";
    o += detail::marker(k, lx + 15, ly, colour) + "\n";
    o += "<text x=\"" + num(lx + 38) + "\" y=\"" + num(ly + 4.5) + "\"" +
         (s.emphasized ? " font-weight=\"bold\"" : "") + ">" + detail::escape(s.label) +
         "</text>\n";
    ly += 20;
    if (s.points.empty()) {
      o += "<text x=\"" + num(lx + 38) + "\" y=\"" + num(ly + 1) +
           "\" font-size=\"11\" fill=\"#777\">" + detail::escape(c.empty_note) + "</text>\n";
      ly += 16;
    }
  }
  o += "</g>\n</svg>\n";
  return o;
}

}  // namespace remat::tools::svg
