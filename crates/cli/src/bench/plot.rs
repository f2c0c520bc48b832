//! The bench's SVG: aggregate throughput by reader shape, one bar per client.

use super::report::Row;
use plotters::prelude::*;
use std::path::Path;

pub fn throughput(path: &Path, rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    let shapes: Vec<String> = {
        let mut v: Vec<String> = rows
            .iter()
            .filter(|r| r.client != "curl")
            .map(|r| format!("{}x{}", r.processes, r.prefetch))
            .collect();
        v.dedup();
        v
    };
    let clients: Vec<String> = {
        let mut v: Vec<String> = rows.iter().map(|r| r.client.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let max = rows.iter().map(|r| r.mb_per_s).fold(1.0, f64::max) * 1.15;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let groups = shapes.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "sluice bench: aggregate MB/s by reader shape (processes x prefetch)",
            ("sans-serif", 20),
        )
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
                shapes.get(x.round() as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("MB/s")
        .draw()?;
    // curl is drawn as a line, so only the other clients share each group's width.
    let bar_clients: Vec<&String> = clients.iter().filter(|c| *c != "curl").collect();
    let width = 0.8 / bar_clients.len().max(1) as f64;
    for (ci, client) in clients.iter().enumerate() {
        let color = Palette99::pick(ci).to_rgba();
        let bars: Vec<Rectangle<(f64, f64)>> = if client == "curl" {
            // The per-core reference: a line across every group.
            Vec::new()
        } else {
            rows.iter()
                .filter(|r| &r.client == client)
                .filter_map(|r| {
                    shapes
                        .iter()
                        .position(|s| *s == format!("{}x{}", r.processes, r.prefetch))
                        .map(|g| (g, r.mb_per_s))
                })
                .map(|(g, v)| {
                    let slot = bar_clients.iter().position(|c| *c == client).unwrap_or(0) as f64;
                    let x0 = g as f64 - 0.4 + (slot + 0.05) * width;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled())
                })
                .collect()
        };
        if client == "curl" {
            if let Some(r) = rows.iter().find(|r| r.client == "curl") {
                chart
                    .draw_series(LineSeries::new(
                        [(-0.5, r.mb_per_s), (groups as f64 - 0.5, r.mb_per_s)],
                        color.stroke_width(2),
                    ))?
                    .label(format!("curl, 1 process ({:.0} MB/s)", r.mb_per_s))
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                    });
            }
        } else {
            chart
                .draw_series(bars)?
                .label(client.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 20, y + 5)], color.filled())
                });
        }
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
