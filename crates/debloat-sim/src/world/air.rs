//! The world's side of a Wi-Fi network: packets from the wired host cross the wire to the AP,
//! stations queue their own; TXOPs start and complete on the world's clock.

use super::*;

impl World {
    /// Replace the two links by a Wi-Fi AP and its stations: `Up` packets go from the AP to the
    /// station of their destination host, `Down` packets from the station of their source host
    /// to the AP; `wired_ns` is the one-way delay between the AP and the wired host.
    pub fn set_wifi(&mut self, wifi: crate::wifi::Wifi, wired_ns: Nanos) {
        self.wifi = Some(Box::new(wifi));
        self.wired_ns = wired_ns;
    }

    /// The Wi-Fi network, if this world has one.
    pub fn wifi(&self) -> Option<&crate::wifi::Wifi> {
        self.wifi.as_deref()
    }

    /// A packet enters the Wi-Fi network: from the wired host it first crosses the wire to the
    /// AP; a station hands it to its own queue at once.
    pub(super) fn send_wifi(&mut self, d: Dir, p: SimPacket) {
        match d {
            Dir::Up if self.wired_ns > 0 => {
                self.events
                    .push(self.now + self.wired_ns, Event::ToAp(Box::new(p)));
            }
            Dir::Up => self.ap_receive(p),
            Dir::Down => {
                let now = self.now;
                let Some(w) = self.wifi.as_mut() else { return };
                let n = w.config().stations.len();
                w.sta_enqueue(station_of_host(host_octet(p.meta.flow.src()), n), p, now);
                self.drain_wifi_drops();
                self.start_air();
            }
        }
    }

    /// The AP takes a packet from the wire for its station.
    pub(super) fn ap_receive(&mut self, p: SimPacket) {
        let now = self.now;
        let Some(w) = self.wifi.as_mut() else { return };
        let n = w.config().stations.len();
        w.ap_enqueue(station_of_host(host_octet(p.meta.flow.dst()), n), p, now);
        self.drain_wifi_drops();
        self.start_air();
    }

    pub(super) fn drain_wifi_drops(&mut self) {
        let Some(w) = self.wifi.as_mut() else { return };
        while let Some(p) = w.take_dropped() {
            if let Body::Data { flow, .. } = p.body {
                if let Some(f) = self.flows.get_mut(flow as usize) {
                    f.drops += 1;
                }
            }
        }
    }

    pub(super) fn start_air(&mut self) {
        let now = self.now;
        let Some(w) = self.wifi.as_mut() else { return };
        if let Some(t) = w.start(now) {
            self.events.push(t, Event::Air);
        }
        if let Some(t) = w.take_wakeup() {
            self.events.push(t, Event::WifiWake);
        }
        self.drain_wifi_drops();
    }

    pub(super) fn air_done(&mut self) {
        let now = self.now;
        let mut out = std::mem::take(&mut self.air_out);
        if let Some(w) = self.wifi.as_mut() {
            w.complete(now, &mut out);
        }
        for (down_link, p) in out.drain(..) {
            // AP → station: the station has it now; station → AP: it still crosses the wire.
            if down_link {
                self.deliver_after(Dir::Up, p, 0);
            } else {
                self.deliver_after(Dir::Down, p, self.wired_ns);
            }
        }
        self.air_out = out;
        self.start_air();
    }
}
