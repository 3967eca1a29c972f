import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip, type ChartDataset } from 'chart.js';
import { useEffect, useRef } from 'preact/hooks';

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Tooltip, Legend);

export const PALETTE = ['#2563eb', '#d97706', '#059669', '#7c3aed', '#db2777', '#0891b2', '#65a30d', '#dc2626'];

interface BarChartProps {
  labels: string[];
  datasets: ChartDataset<'bar', (number | null)[]>[];
  /** What the picture shows, for people who cannot see it; the same numbers are in a table nearby. */
  label: string;
  yTitle: string;
  xTitle: string;
  yMax?: number;
  stacked?: boolean;
  testId: string;
}

/** A Chart.js bar chart kept in step with its props; no animation, so it never lags the data. */
export function BarChart({ labels, datasets, label, yTitle, xTitle, yMax, stacked, testId }: BarChartProps) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const chart = useRef<Chart<'bar', (number | null)[], string> | undefined>(undefined);

  useEffect(() => {
    if (!canvas.current) return;
    chart.current = new Chart(canvas.current, {
      type: 'bar',
      data: { labels: [], datasets: [] },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        plugins: { legend: { display: true, position: 'bottom' } },
        scales: {
          x: { stacked: !!stacked, title: { display: true, text: xTitle } },
          y: { stacked: !!stacked, beginAtZero: true, ...(yMax !== undefined ? { max: yMax } : {}), title: { display: true, text: yTitle } },
        },
      },
    });
    return () => {
      chart.current?.destroy();
      chart.current = undefined;
    };
    // The options are fixed for the life of the chart; only its data follows the props.
  }, []);

  useEffect(() => {
    const current = chart.current;
    if (!current) return;
    current.data.labels = labels;
    current.data.datasets = datasets;
    current.update('none');
  }, [labels, datasets]);

  return (
    <div class="chart" data-testid={testId}>
      <canvas ref={canvas} role="img" aria-label={label} />
    </div>
  );
}
