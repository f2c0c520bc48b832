//! The bench's SVGs: one per workload, its figure (megabytes a second, or requests a second
//! where no bytes move) by shape or concurrency, one bar per client, curl as a line across.

use super::report::{OpsRow, Row};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

type Res = Result<(), Box<dyn std::error::Error>>;

/// One chart: bars (client, group, value) and curl's reference line.
struct Chart {
    title: String,
    unit: &'static str,
    groups: Vec<String>,
    bars: Vec<(String, String, f64)>,
    curl: Option<(String, f64)>,
}

/// Writes one SVG per workload: `path` itself when there is one, else `STEM-WORKLOAD.svg`
/// beside it.
pub fn workloads(path: &Path, get: &[Row], ops: &[OpsRow]) -> Res {
    let mut charts = Vec::new();
    if !get.is_empty() {
        charts.push(("get".to_owned(), get_chart(get)));
    }
    let mut names: Vec<&str> = ops.iter().map(|r| r.workload.as_str()).collect();
    names.dedup();
    for name in names {
        let rows: Vec<&OpsRow> = ops.iter().filter(|r| r.workload == name).collect();
        charts.push((name.replace(' ', "-"), ops_chart(name, &rows)));
    }
    let one = charts.len() == 1;
    for (name, chart) in charts {
        let p = if one {
            path.to_owned()
        } else {
            beside(path, &name)
        };
        draw(&p, &chart)?;
    }
    Ok(())
}

fn beside(path: &Path, name: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or("bench".into(), |s| s.to_string_lossy());
    path.with_file_name(format!("{stem}-{name}.svg"))
}

fn get_chart(rows: &[Row]) -> Chart {
    let shape = |r: &Row| format!("{}x{}", r.processes, r.prefetch);
    let mut groups: Vec<String> = rows
        .iter()
        .filter(|r| r.client != "curl")
        .map(shape)
        .collect();
    groups.dedup();
    Chart {
        title: "sluice bench get: aggregate MB/s by reader shape (processes x prefetch)".into(),
        unit: "MB/s",
        groups,
        bars: rows
            .iter()
            .filter(|r| r.client != "curl")
            .map(|r| (r.client.clone(), shape(r), r.mb_per_s))
            .collect(),
        curl: rows
            .iter()
            .find(|r| r.client == "curl")
            .map(|r| ("curl, 1 process".to_owned(), r.mb_per_s)),
    }
}

fn ops_chart(name: &str, rows: &[&OpsRow]) -> Chart {
    let by_bytes = rows.iter().any(|r| r.report.bytes() > 0);
    let group = |r: &OpsRow| format!("{} in flight", r.concurrency);
    let mut groups: Vec<String> = rows.iter().map(|r| group(r)).collect();
    groups.sort();
    groups.dedup();
    let (others, curl): (Vec<&&OpsRow>, Vec<&&OpsRow>) =
        rows.iter().partition(|r| r.client != "curl");
    Chart {
        title: format!(
            "sluice bench {name}: {} by concurrency",
            if by_bytes { "MB/s" } else { "requests/s" }
        ),
        unit: if by_bytes { "MB/s" } else { "requests/s" },
        groups,
        bars: others
            .iter()
            .map(|r| (r.client.clone(), group(r), r.figure()))
            .collect(),
        // curl's first row is the line (one per concurrency would be several lines).
        curl: curl
            .first()
            .map(|r| (format!("curl, {} in flight", r.concurrency), r.figure())),
    }
}

fn draw(path: &Path, c: &Chart) -> Res {
    let mut clients: Vec<String> = c.bars.iter().map(|b| b.0.clone()).collect();
    clients.sort();
    clients.dedup();
    let max = c
        .bars
        .iter()
        .map(|b| b.2)
        .chain(c.curl.as_ref().map(|r| r.1))
        .fold(1.0, f64::max)
        * 1.15;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let groups = c.groups.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(&c.title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..groups as f64 - 0.5, 0f64..max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && *x >= 0.0 {
                c.groups
                    .get(x.round() as usize)
                    .cloned()
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(c.unit)
        .draw()?;
    let width = 0.8 / clients.len().max(1) as f64;
    for (slot, client) in clients.iter().enumerate() {
        let color = Palette99::pick(slot).to_rgba();
        let bars: Vec<Rectangle<(f64, f64)>> = c
            .bars
            .iter()
            .filter(|b| &b.0 == client)
            .filter_map(|b| c.groups.iter().position(|g| *g == b.1).map(|g| (g, b.2)))
            .map(|(g, v)| {
                let x0 = g as f64 - 0.4 + (slot as f64 + 0.05) * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled())
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(client.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], color.filled()));
    }
    if let Some((label, v)) = &c.curl {
        let color = Palette99::pick(clients.len()).to_rgba();
        chart
            .draw_series(LineSeries::new(
                [(-0.5, *v), (groups as f64 - 0.5, *v)],
                color.stroke_width(2),
            ))?
            .label(format!("{label} ({v:.0} {})", c.unit))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}
