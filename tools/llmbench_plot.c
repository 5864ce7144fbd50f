/*
 * tools/llmbench_plot.c — the report's time series drawn as a standalone
 * SVG: output tokens/s per tenant above, TTFT p50 (solid) and p99 (dashed)
 * per tenant below, on one shared time axis.
 *
 * The one idea: the SVG is written directly, no plotting library.  Each
 * panel maps data to pixels through one struct lb_axis pair; TTFT uses a
 * log scale because queueing makes it span decades within one run.  A null
 * point (no request got its first token in that bucket) lifts the pen, so a
 * gap in the data is a gap in the line, not a made-up slope.
 */
#include "tools/llmbench.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* Layout in pixels. */
#define LB_W       960
#define LB_H       700
#define LB_LEFT    80
#define LB_RIGHT   760 /* plot area's right edge; the legend is beyond it */
#define LB_P1_TOP  70
#define LB_P1_BOT  320
#define LB_P2_TOP  380
#define LB_P2_BOT  630
#define LB_N_TICKS 5

static const char *const lb_colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                         "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
#define LB_N_COLOURS ((int)(sizeof(lb_colours) / sizeof(lb_colours[0])))

/* A linear or log10 map from data [lo, hi] to pixels [p0, p1]. */
struct lb_axis {
    double lo, hi, p0, p1;
    int log;
};

static double lb_axis_px(const struct lb_axis *a, double v)
{
    double x0 = a->log ? log10(a->lo) : a->lo, x1 = a->log ? log10(a->hi) : a->hi;
    double x = a->log ? log10(v > a->lo ? v : a->lo) : v;
    return a->p0 + (x - x0) / (x1 - x0) * (a->p1 - a->p0);
}

/* Writes s with the five XML special characters escaped. */
static void lb_xml(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* A round step (1, 2 or 5 times a power of ten) giving about n ticks. */
static double lb_nice_step(double range, int n)
{
    if (!(range > 0) || !isfinite(range))
        range = 1; /* a flat or broken range still gets finite ticks */
    double raw = range / n, mag = pow(10, floor(log10(raw))), norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

/* ----------------------------------------------------------------- data */

/* The largest number in arrays `key` of every tenant, and (log) the
 * smallest positive one. */
static void lb_range(const json_t *tenants, const char *key, double *lo, double *hi)
{
    const char *name;
    json_t *s, *v;
    size_t k;
    json_object_foreach((json_t *)tenants, name, s)
    {
        json_array_foreach(json_object_get(s, key), k, v)
        {
            double x = json_number_value(v);
            if (!json_is_number(v))
                continue;
            if (x > *hi)
                *hi = x;
            if (x > 0 && (*lo <= 0 || x < *lo))
                *lo = x;
        }
    }
}

/* ----------------------------------------------------------------- drawing */

static void lb_text(FILE *f, double x, double y, const char *anchor, const char *extra,
                    const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" %s>", x, y, anchor, extra);
    lb_xml(f, s);
    fputs("</text>\n", f);
}

/* The frame, grid and tick labels of one panel. */
static void lb_panel_axes(FILE *f, const struct lb_axis *x, const struct lb_axis *y,
                          const char *ylabel, int xlabel)
{
    char buf[64];
    fprintf(f,
            "<rect x=\"%d\" y=\"%.0f\" width=\"%d\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"#000\"/>\n",
            LB_LEFT, y->p1, LB_RIGHT - LB_LEFT, y->p0 - y->p1);
    double xs = lb_nice_step(x->hi - x->lo, 8);
    for (double t = 0; t <= x->hi + 1e-9; t += xs) {
        double px = lb_axis_px(x, t);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", px,
                y->p1, px, y->p0);
        snprintf(buf, sizeof(buf), "%g", t);
        lb_text(f, px, y->p0 + 16, "middle", "", buf);
    }
    if (y->log) {
        for (double v = y->lo; v <= y->hi * 1.0001; v *= 10) {
            double py = lb_axis_px(y, v);
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    LB_LEFT, py, LB_RIGHT, py);
            snprintf(buf, sizeof(buf), "%g", v);
            lb_text(f, LB_LEFT - 6, py + 4, "end", "", buf);
        }
    } else {
        double ys = lb_nice_step(y->hi - y->lo, LB_N_TICKS);
        for (double v = y->lo; v <= y->hi + 1e-9; v += ys) {
            double py = lb_axis_px(y, v);
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    LB_LEFT, py, LB_RIGHT, py);
            snprintf(buf, sizeof(buf), "%g", v);
            lb_text(f, LB_LEFT - 6, py + 4, "end", "", buf);
        }
    }
    double mid = (y->p0 + y->p1) / 2;
    fprintf(f,
            "<text x=\"20\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 20 %.1f)\">",
            mid, mid);
    lb_xml(f, ylabel);
    fputs("</text>\n", f);
    if (xlabel)
        lb_text(f, (LB_LEFT + LB_RIGHT) / 2.0, y->p0 + 36, "middle", "", "time (s)");
}

/* 1 when element k of arr is a number. */
static int lb_has(const json_t *arr, size_t k)
{
    return json_is_number(json_array_get(arr, k));
}

/* One series as a path; nulls lift the pen, and a point with no neighbour
 * gets a dot so it stays visible. */
static void lb_line(FILE *f, const json_t *arr, const json_t *t, double half,
                    const struct lb_axis *x, const struct lb_axis *y, const char *colour,
                    const char *dash)
{
    size_t n = json_array_size(arr);
    int pen = 0;
    fprintf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s d=\"", colour, dash);
    for (size_t k = 0; k < n; k++) {
        if (!lb_has(arr, k)) {
            pen = 0;
            continue;
        }
        double px = lb_axis_px(x, json_number_value(json_array_get(t, k)) + half);
        double py = lb_axis_px(y, json_number_value(json_array_get(arr, k)));
        fprintf(f, "%c%.1f,%.1f ", pen ? 'L' : 'M', px, py);
        pen = 1;
    }
    fputs("\"/>\n", f);
    for (size_t k = 0; k < n; k++)
        if (lb_has(arr, k) && (k == 0 || !lb_has(arr, k - 1)) && !lb_has(arr, k + 1))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\"/>\n",
                    lb_axis_px(x, json_number_value(json_array_get(t, k)) + half),
                    lb_axis_px(y, json_number_value(json_array_get(arr, k))), colour);
}

static void lb_legend(FILE *f, const json_t *tenants)
{
    const char *name;
    json_t *s;
    int i = 0;
    json_object_foreach((json_t *)tenants, name, s)
    {
        double y = LB_P1_TOP + 10 + 20.0 * i;
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.0f\" x2=\"%d\" y2=\"%.0f\" stroke=\"%s\" "
                "stroke-width=\"3\"/>\n",
                LB_RIGHT + 15, y, LB_RIGHT + 40, y, lb_colours[i % LB_N_COLOURS]);
        lb_text(f, LB_RIGHT + 46, y + 4, "start", "", name);
        i++;
    }
    double y = LB_P2_TOP + 10;
    fprintf(f, "<line x1=\"%d\" y1=\"%.0f\" x2=\"%d\" y2=\"%.0f\" stroke=\"#000\"/>\n",
            LB_RIGHT + 15, y, LB_RIGHT + 40, y);
    lb_text(f, LB_RIGHT + 46, y + 4, "start", "", "p50");
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.0f\" x2=\"%d\" y2=\"%.0f\" stroke=\"#000\" "
            "stroke-dasharray=\"6 4\"/>\n",
            LB_RIGHT + 15, y + 20, LB_RIGHT + 40, y + 20);
    lb_text(f, LB_RIGHT + 46, y + 24, "start", "", "p99");
}

/* Both panels: axes from the data's ranges, then one colour per tenant. */
static void lb_panels(FILE *f, const json_t *series)
{
    const json_t *t = json_object_get(series, "t"), *tenants = json_object_get(series, "tenants");
    double bucket = json_number_value(json_object_get(series, "bucket_s"));
    bucket = bucket > 0 ? bucket : 1;
    size_t nb = json_array_size(t);
    double end = nb ? json_number_value(json_array_get(t, nb - 1)) + bucket : bucket;
    struct lb_axis x = {.lo = 0, .hi = end, .p0 = LB_LEFT, .p1 = LB_RIGHT};
    double lo = 0, hi = 0;
    lb_range(tenants, "tok_s", &lo, &hi);
    double step = lb_nice_step(hi > 0 ? hi : 1, LB_N_TICKS);
    struct lb_axis y1 = {
        .lo = 0, .hi = ceil((hi > 0 ? hi : 1) / step) * step, .p0 = LB_P1_BOT, .p1 = LB_P1_TOP};
    lo = hi = 0;
    lb_range(tenants, "ttft_p50_ms", &lo, &hi);
    lb_range(tenants, "ttft_p99_ms", &lo, &hi);
    struct lb_axis y2 = {.lo = lo > 0 ? pow(10, floor(log10(lo))) : 1,
                         .hi = hi > 0 ? pow(10, ceil(log10(hi))) : 1000,
                         .p0 = LB_P2_BOT,
                         .p1 = LB_P2_TOP,
                         .log = 1};
    if (y2.hi <= y2.lo)
        y2.hi = y2.lo * 10;
    lb_panel_axes(f, &x, &y1, "output tokens/s", 0);
    lb_panel_axes(f, &x, &y2, "TTFT ms (log scale)", 1);
    const char *name;
    json_t *s;
    int i = 0;
    json_object_foreach((json_t *)tenants, name, s)
    {
        const char *c = lb_colours[i++ % LB_N_COLOURS];
        lb_line(f, json_object_get(s, "tok_s"), t, bucket / 2, &x, &y1, c, "");
        lb_line(f, json_object_get(s, "ttft_p50_ms"), t, bucket / 2, &x, &y2, c, "");
        lb_line(f, json_object_get(s, "ttft_p99_ms"), t, bucket / 2, &x, &y2, c,
                " stroke-dasharray=\"6 4\"");
    }
    lb_legend(f, tenants);
}

int lb_plot_svg(const char *path, const json_t *report, char *err, size_t errlen)
{
    const json_t *series = json_object_get(report, "series");
    if (!json_is_object(json_object_get(series, "tenants")) ||
        !json_is_array(json_object_get(series, "t"))) {
        snprintf(err, errlen, "the report has no series");
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            LB_W, LB_H, LB_W, LB_H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", LB_W, LB_H);
    fprintf(f,
            "<text x=\"%d\" y=\"30\" text-anchor=\"middle\" font-size=\"16\">llmbench: ", LB_W / 2);
    lb_xml(f, json_string_value(json_object_get(report, "scenario")));
    fputs(" \xe2\x80\x94 ", f); /* an em dash */
    lb_xml(f, json_string_value(json_object_get(report, "target")));
    fputs("</text>\n", f);
    lb_panels(f, series);
    fputs("</svg>\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, errlen, "%s: write failed", path);
        return -1;
    }
    return 0;
}
